"""A window whose prompt is over the budget, its pieces having counted fewer tokens apart than together, loses its
last pieces until it fits (workers.windows.SHRINK_STEPS), not half of them at once (issue 57 item 4)."""

from workers.windows import SHRINK_STEPS, Splitter, WindowPolicy

PARAGRAPH = "The parties agree to keep the information secret. Each party shall protect it with care."


def together(text: str) -> int:
    """Tokens of a window: its words, and one more at each paragraph break inside it (as the bundled tokenizer
    counts a blank line before a word, which a paragraph counted alone ends with)."""
    return len(text.split()) + text.rstrip().count("\n\n")


def test_a_window_over_its_budget_loses_its_last_paragraphs_not_half_of_them():
    text = "\n\n".join(f"{i}. {PARAGRAPH}" for i in range(40))  # 16 words a paragraph
    budget = 100
    checked: list[tuple[int, int]] = []

    def fits(a: int, b: int) -> bool:
        checked.append((a, b))
        return together(text[a:b]) <= budget

    windows = Splitter(text, budget, WindowPolicy(overlap=0.0), lambda piece: len(piece.split()), fits).windows()
    assert all(together(text[w.start:w.end]) <= budget for w in windows)
    for window in windows[:-1]:  # each as long as fits: one more paragraph would not
        more = text.find("\n\n", window.end)
        assert together(text[window.start:more if more > 0 else len(text)]) > budget
    assert len(windows) == 8  # 6 paragraphs count 96 apart, 101 together: 5 a window (84); halved, 3 (14 windows)
    assert len(checked) <= len(windows) * (1 + SHRINK_STEPS)
