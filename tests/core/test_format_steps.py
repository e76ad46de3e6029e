"""format_steps: plain text in a terminal, a real table in a notebook."""

import labsupport.schedules as sch


def test_format_steps_is_text_for_a_terminal():
    table = sch.format_steps(sch.ring_all_reduce(4))
    lines = str(table).splitlines()
    assert lines[0] == "| step | rank 0 sends | rank 1 sends | rank 2 sends | rank 3 sends |"
    assert lines[2].startswith("| 0 | ->1 c3 (+=) | ->2 c0 (+=)") and len(lines) == 2 + 6


def test_format_steps_renders_as_a_table_in_a_notebook():
    from IPython.core.formatters import DisplayFormatter

    table = sch.format_steps(sch.ring_all_reduce(4))
    data, _ = DisplayFormatter().format(table)
    html = data["text/html"]
    assert html.startswith("<table>") and html.count("<tr>") == 1 + 6
    assert "<th>rank 3 sends</th>" in html and "-&gt;1 c3 (+=)" in html  # escaped, not raw
    assert data["text/plain"] == str(table)  # the plain fallback is the table, not a repr
    assert data["text/markdown"] == str(table)
