"""What the notebooks print reads in any browser: no emoji, which Chromium without an emoji font draws as empty
boxes (the exports' status marks ✅ ❌ ⚠️ and the monitor's 🔴 🟢 were boxes there). Marks DejaVu Sans has in their
text forms (✓ ✗ ⚠ ℹ ★) are fine; a variation selector 16 (U+FE0F) asks for the emoji form, so it is not."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Characters below U+1F000 that are drawn as emoji by default (Unicode's Emoji_Presentation=Yes).
_BMP_EMOJI = {0x231A, 0x231B, *range(0x23E9, 0x23ED), 0x23F0, 0x23F3, 0x25FD, 0x25FE, 0x2614, 0x2615,
              *range(0x2648, 0x2654), 0x267F, 0x2693, 0x26A1, 0x26AA, 0x26AB, 0x26BD, 0x26BE, 0x26C4, 0x26C5, 0x26CE,
              0x26D4, 0x26EA, 0x26F2, 0x26F3, 0x26F5, 0x26FA, 0x26FD, 0x2705, 0x270A, 0x270B, 0x2728, 0x274C, 0x274E,
              0x2753, 0x2754, 0x2755, 0x2757, 0x2795, 0x2796, 0x2797, 0x27B0, 0x27BF, 0x2B1B, 0x2B1C, 0x2B50, 0x2B55}


def emoji_in(text: str) -> list[str]:
    return [c for c in text if ord(c) >= 0x1F000 or ord(c) in _BMP_EMOJI or ord(c) == 0xFE0F]


def test_emoji_in_finds_the_marks_that_were_boxes_and_leaves_text_marks():
    assert emoji_in("✅ ok ❌ ⏳ 🔴 ℹ️") == ["✅", "❌", "⏳", "🔴", "\ufe0f"]
    assert emoji_in("✓ passed ✗ ⚠ ℹ ★ → — × ²") == []


def test_helpers_and_notebooks_print_no_emoji():
    files = [*ROOT.joinpath("helpers").rglob("*.py"), *ROOT.joinpath("notebooks").glob("*.ipynb")]
    found = {str(p.relative_to(ROOT)): sorted(set(emoji_in(p.read_text(encoding="utf-8")))) for p in files}
    assert {k: v for k, v in found.items() if v} == {}
