"""The server-side SVG line chart (governance.charts): pure Python, no database."""

import re
from xml.etree import ElementTree

from governance.charts import PALETTE, Point, Series, line_chart

SVG = "{http://www.w3.org/2000/svg}"


def found(element: ElementTree.Element, path: str) -> ElementTree.Element:
    """The first element at `path` (the test fails when there is none)."""
    child = element.find(path)
    assert child is not None, path
    return child


def chart(series: list[Series], labels: list[str] | None = None) -> str:
    return line_chart(
        title="Taxa de transferência <triagem>",
        description="Parcela das conversas transferidas",
        x_labels=labels or ["01/11", "02/11", "03/11"],
        series=series,
        y_max=50.0,
        format_y=lambda value: f"{value:.0f} %",
        chart_id="test-chart",
    )


def test_the_chart_is_well_formed_accessible_svg() -> None:
    svg = chart([Series(name="Padrão", points=[Point(10, "a"), None, Point(30, "c")])])

    root = ElementTree.fromstring(svg)
    assert (root.get("role"), root.get("aria-label")) == ("img", "Taxa de transferência <triagem>")
    assert root.get("aria-labelledby") == "test-chart-title test-chart-desc"
    assert found(root, f"{SVG}title").text == "Taxa de transferência <triagem>"
    assert found(root, f"{SVG}desc").text == "Parcela das conversas transferidas"
    assert "style=" not in svg


def test_each_series_is_a_line_with_a_titled_point_per_value_and_a_legend() -> None:
    svg = chart(
        [
            Series(
                name="Prompt padrão",
                points=[Point(10, "P · 01/11: 10 %"), None, Point(30, "P · 03/11")],
            ),
            Series(
                name="Prompt personalizado #3", points=[None, Point(50, "O · 02/11: 50 %"), None]
            ),
        ]
    )

    root = ElementTree.fromstring(svg)
    groups = root.findall(f"{SVG}g[@class='series series-0']") + root.findall(
        f"{SVG}g[@class='series series-1']"
    )
    assert [g.get("aria-label") for g in groups] == ["Prompt padrão", "Prompt personalizado #3"]
    first, second = groups
    # Two points: one line through them, skipping the day without a value.
    assert found(first, f"{SVG}polyline").get("points") == "56.0,204.8 744.0,110.4"
    assert found(first, f"{SVG}polyline").get("stroke") == PALETTE[0]
    assert [t.text for t in first.iter(f"{SVG}title")] == ["P · 01/11: 10 %", "P · 03/11"]
    # One point: a marker, no line (a square: the second series' shape).
    assert second.find(f"{SVG}polyline") is None
    assert [t.text for t in second.iter(f"{SVG}title")] == ["O · 02/11: 50 %"]
    assert found(second, f"{SVG}rect").get("fill") == PALETTE[1]
    legend = found(root, f"{SVG}g[@class='legend']")
    assert [t.text for t in legend.iter(f"{SVG}text")] == [
        "Prompt padrão",
        "Prompt personalizado #3",
    ]


def test_the_axes_are_labelled() -> None:
    svg = chart([Series(name="A", points=[Point(0, "a"), Point(5, "b"), Point(10, "c")])])

    root = ElementTree.fromstring(svg)
    y_axis = found(root, f"{SVG}g[@class='axis y-axis']")
    x_axis = found(root, f"{SVG}g[@class='axis x-axis']")
    assert [t.text for t in y_axis.iter(f"{SVG}text")] == [
        "0 %",
        "10 %",
        "20 %",
        "30 %",
        "40 %",
        "50 %",
    ]
    assert [t.text for t in x_axis.iter(f"{SVG}text")] == ["01/11", "02/11", "03/11"]


def test_long_axes_show_at_most_a_dozen_labels_and_the_last() -> None:
    labels = [f"{day:02d}/10" for day in range(1, 32)]

    svg = chart([Series(name="A", points=[Point(1, "x")] * 31)], labels)

    x_axis = svg.split("axis x-axis", 1)[1].split("</g>", 1)[0]
    assert re.findall(r">(\d\d/10)<", x_axis) == [
        "01/10",
        "04/10",
        "07/10",
        "10/10",
        "13/10",
        "16/10",
        "19/10",
        "22/10",
        "25/10",
        "28/10",
        "31/10",
    ]


def test_names_are_escaped() -> None:
    svg = chart([Series(name='<script>"x"</script>', points=[Point(1, "<b>")] * 3)])

    assert "<script>" not in svg
    assert "&lt;script&gt;&quot;x&quot;&lt;/script&gt;" in svg
