"""A cheat: another function. build_model makes conv3 a 1x1 convolution (nine times fewer FLOPs in that layer):
refused before training (same_function)."""
from torch import nn

from helpers.challenge.recipes import classic_training

train = classic_training(batch_size=16, lr=0.01, images=256)


def build_model(model):
    model.conv3 = nn.Conv2d(model.conv3.in_channels, model.conv3.out_channels, 1)
    return model
