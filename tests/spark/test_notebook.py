"""notebooks/quickstart.ipynb: saved executed (a reader sees the outputs without running
it), and runs top to bottom here with outputs that make sense: the rows written are read
back, the stream reads them in several micro-batches with falling lag, the consumer
group's lag is 0 after the stream and 300 after 300 more rows, the plots are drawn, and
Avro values (valueFormat=avro) are written and read back typed."""

import pathlib
import re

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOK = pathlib.Path(__file__).parents[2] / "notebooks" / "quickstart.ipynb"


def texts(nb):
    out = []
    for cell in nb.cells:
        for o in cell.get("outputs", []) if cell.cell_type == "code" else []:
            if o.get("output_type") == "stream" and o.get("name") == "stdout":
                out.append(o["text"])
            elif "text/plain" in o.get("data", {}):
                out.append(o["data"]["text/plain"])
    return "\n".join(out)


def check_outputs(nb):
    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    assert sum("image/png" in o.get("data", {}) for o in outputs) >= 2, "the plots were not drawn"
    text = texts(nb)
    assert "wrote 1000 page views" in text
    assert "rows read back: 1000" in text
    # valueFormat=avro: the typed value struct, written and read back
    assert "|-- value: struct (nullable = true)" in text and "|    |-- at: timestamp" in text
    assert "typed rows read back: 1000" in text
    batches = re.search(r"micro-batches: (\d+), rows streamed: (\d+)", text)
    assert batches and int(batches.group(1)) >= 4 and int(batches.group(2)) == 1000, text[-2000:]
    assert "group lag after the stream: 0" in text
    assert "group lag after 300 more rows: 300" in text
    # the progress table: rows per micro-batch at most 250, lag falling to 0
    table = re.search(
        r"batch\s+rows\s+end offset \(sum\)\s+latest offset \(sum\)\s+lag after "
        r"batch\n((?:\d+\s+\d+\s+\d+\s+\d+\s+\d+\s+\d+\n?)+)",
        text,
    )
    assert table, text[-3000:]
    rows = [list(map(int, line.split()[2:])) for line in table.group(1).strip().splitlines()]
    assert all(0 < r[0] <= 250 for r in rows) and sum(r[0] for r in rows) == 1000, rows
    lags = [r[3] for r in rows]
    assert lags == sorted(lags, reverse=True) and lags[-1] == 0, rows


def test_saved_notebook_is_executed_with_sensible_outputs():
    check_outputs(nbformat.read(NOTEBOOK, as_version=4))


@pytest.mark.heavy
@pytest.mark.integration
@pytest.mark.timeout(900)
def test_quickstart_notebook_runs(tmp_path):
    nb = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    check_outputs(nb)
