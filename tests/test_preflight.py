from helpers import preflight


def test_preflight_on_a_cpu_explains_what_to_do():
    pf = preflight.run()
    rows = {c.name: c for c in pf.checks}
    assert rows["GPU"].status == "missing" and "smoke scale" in rows["GPU"].fix
    assert rows["scale"].detail.startswith("smoke")
    assert not pf.ok_for_full
    table = pf.table()
    assert list(table.data.columns) == ["check", "status", "detail", "what to do"]
    shown = table._repr_html_()  # every word of the advice, none cut at 50 characters as a DataFrame's view does
    assert rows["GPU"].fix in shown.replace("&rarr;", "→") and "..." not in shown
    assert "GPU" in str(pf)
