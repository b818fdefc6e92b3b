"""A cheat: conv3 as a 1x1 convolution (nine times fewer FLOPs in that layer, and another function)."""
from torch import nn

from helpers.challenge import ladder

config = ladder.reference_solution().config


def build_model(model):
    model.conv3 = nn.Conv2d(model.conv3.in_channels, model.conv3.out_channels, 1)
    return model
