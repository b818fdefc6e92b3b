"""A cheat: another function, swapped in after the harness's first check. Inside the training function conv3 runs
only the centre tap of its 3x3 kernel (a 1x1 convolution on the same weights, nine times cheaper): the spot check
during training and the check of the returned network find it (same_function)."""
import torch.nn.functional as F

from helpers.challenge.recipes import classic_training

_classic = classic_training(batch_size=16, lr=0.01, images=256)


def train(model, data, device):
    conv3 = model.conv3
    conv3.forward = lambda x: F.conv2d(x, conv3.weight[:, :, 1:2, 1:2], conv3.bias)  # 3x3 padding 1 -> 1x1
    return _classic(model, data, device)
