"""Honest, and slow on a GPU: the classic training loop of 01 (each image resized by PIL on the CPU, a sync after
every copy and step, fp32), as 06 hands it to the learner, trained for one epoch of the training set: the recipe the
accuracy target was measured on."""
from helpers.challenge.recipes import classic_training

NAME = "the classic loop"


def train(model, data, device):
    loop = classic_training(batch_size=32, lr=0.01, images=len(data))
    return loop(model, data, device)
