import pytest
import torch

from helpers.models import ReferenceCNN, count_params, feature_size


@pytest.mark.parametrize("size", [8, 32, 64, 100])
def test_shapes_agree_at_any_size(size):
    model = ReferenceCNN(image_size=size)
    out = model(torch.randn(2, 3, size, size))
    assert out.shape == (2, 10)


def test_course_size_has_the_seed_lab_shapes():
    with torch.device("meta"):
        model = ReferenceCNN(image_size=224)
    assert model.fc1.in_features == 256 * 28 * 28
    assert model.fc1.out_features == 512
    out = model(torch.randn(4, 3, 224, 224, device="meta"))
    assert out.shape == (4, 10)
    assert count_params(model) == 103_136_906


@pytest.mark.parametrize("size", [0, 7, -3])
def test_too_small_images_are_refused_with_the_minimum(size):
    with pytest.raises(ValueError, match="at least 8"):
        ReferenceCNN(image_size=size)
    with pytest.raises(ValueError):
        feature_size(size)


def test_wrong_input_size_says_how_to_fix():
    model = ReferenceCNN(image_size=32)
    with pytest.raises(ValueError, match="image_size=64"):
        model(torch.randn(1, 3, 64, 64))
