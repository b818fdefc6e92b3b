"""Fast and wrong: the classic loop at ten times its learning rate. It trains on every image it should, and learns
nothing (held-out accuracy near chance): refused for missing the accuracy target (accuracy_target)."""
from helpers import env
from helpers.challenge.recipes import classic_training

train = classic_training(batch_size=env.pick(smoke=16, full=32), lr=0.1, images=256)
