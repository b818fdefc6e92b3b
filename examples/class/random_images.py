"""A cheat: no images from the training set. It trains on random tensors it makes itself (as fast as it likes,
nothing to load): the harness handed out no image, so it is refused (images_seen), whatever its accuracy."""
import torch
import torch.nn.functional as F


def train(model, data, device):
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    for _ in range(4):
        x = torch.randn(16, 3, data.image_size, data.image_size, device=device)
        y = torch.randint(0, data.num_classes, (16,), device=device)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model
