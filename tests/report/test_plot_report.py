"""`pybench plot` and `pybench report`: files, escaping, and the report in a real headless browser."""

from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest
from matrix_docs import link_matrix

from pybench.cli.main import main as main_for_tests

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
RUN_A = FIXTURES / "compare_allreduce_a.json"
RUN_B = FIXTURES / "compare_allreduce_b.json"
RUN_FP16 = FIXTURES / "compare_allreduce_fp16.json"
MODEL = FIXTURES / "report_model_allreduce.json"
CCR = FIXTURES / "report_ccr_ddp.json"

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
HOSTILE = '<script>document.title="PWNED"</script><img src=x onerror="document.title=\'PWNED\'">$x^{2$'

matplotlib = pytest.importorskip("matplotlib", reason="plots and reports need matplotlib (pip install matplotlib)")


def _hostile_copy(tmp_path: Path) -> Path:
    """A result file whose every free-text field tries to inject markup (and matplotlib math)."""
    doc = json.loads(RUN_A.read_text())
    doc["environment"]["cpu_model"] = HOSTILE
    doc["environment"]["mpi"]["library"] = HOSTILE
    doc["hosts"] = {HOSTILE: 2}
    doc["link_class"] = HOSTILE
    doc["command"] = ["pybench", HOSTILE]
    doc["started_at"] = HOSTILE
    doc["options"]["buffer_allocation"] = HOSTILE
    # The file name ends up in labels and headings too.
    path = tmp_path / 'run<img src=x onerror=alert(1)>$.json'
    path.write_text(json.dumps(doc))
    return path


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []  # text nodes, entities decoded

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def _tags(html_text: str) -> list[tuple[str, dict]]:
    p = _Tags()
    p.feed(html_text)
    return p.tags


def _text_nodes(html_text: str) -> list[str]:
    p = _Tags()
    p.feed(html_text)
    p.close()
    return p.text


# -- plot -----------------------------------------------------------------------------------

def test_plot_png_and_svg_with_model(tmp_path, capsys):
    png, svg = tmp_path / "bw.png", tmp_path / "bw.svg"
    assert main_for_tests(["plot", str(RUN_A), str(RUN_FP16), "--model", str(MODEL), "-o", str(png)]) == 0
    assert png.read_bytes().startswith(PNG_MAGIC) and png.stat().st_size > 10_000
    assert main_for_tests(["plot", str(RUN_A), "--model", str(MODEL), "-o", str(svg)]) == 0
    root = ET.fromstring(svg.read_text())
    assert root.tag.endswith("svg")
    text = svg.read_text()
    assert "bus bandwidth against size" in text and "model allreduce mpi 2r" in text and "95% band" in text
    assert f"# wrote {svg}" in capsys.readouterr().err
    assert not list(tmp_path.glob(".*.tmp"))  # atomic writes leave no temporary files behind


def test_plot_refuses_to_overwrite_without_force(tmp_path, capsys):
    out = tmp_path / "p.png"
    out.write_bytes(b"keep me")
    assert main_for_tests(["plot", str(RUN_A), "-o", str(out)]) == 2
    assert "already exists; pass --force" in capsys.readouterr().err
    assert out.read_bytes() == b"keep me"
    assert main_for_tests(["plot", str(RUN_A), "-o", str(out), "--force"]) == 0
    assert out.read_bytes().startswith(PNG_MAGIC)


@pytest.mark.parametrize("argv, message", [
    (["plot", str(RUN_A), "-o", "{tmp}/p.jpg"], "name the file .png or .svg"),
    (["plot", str(RUN_A), "-o", "{tmp}/nope/p.png"], "does not exist"),
    (["plot", "{tmp}/missing.json", "-o", "{tmp}/p.png"], "cannot read"),
    (["plot", str(RUN_A), "--model", str(RUN_A), "-o", "{tmp}/p.png"], "model"),
    (["plot", str(RUN_A), "--model", str(CCR), "-o", "{tmp}/p.png"], "model"),
    (["report", str(RUN_A), "-o", "{tmp}/r.txt"], "name the output .html"),
    (["report", str(RUN_A), "--ccr", str(MODEL), "-o", "{tmp}/r.html"], "is not 'pybench.ccr' (a pybench CCR table)"),
    (["report", str(RUN_A), "--ccr", "{tmp}/missing.json", "-o", "{tmp}/r.html"], "cannot read"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, argv, message):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    assert main_for_tests(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("pybench: error: ") and err.count("\n") == 1 and message in err
    assert not [p for p in tmp_path.iterdir() if p.suffix in (".png", ".html")]


def test_plot_of_a_model_of_another_collective_says_what_the_file_has(tmp_path, capsys):
    doc = json.loads(RUN_A.read_text())
    doc["benchmark"] = doc["collective"] = "allgather"
    other = tmp_path / "ag.json"
    other.write_text(json.dumps(doc))
    assert main_for_tests(["plot", str(other), "--model", str(MODEL), "-o", str(tmp_path / "p.png")]) == 2
    assert "no model of a plotted collective (allgather); the file has: allreduce" in capsys.readouterr().err


def test_a_result_without_sizes_is_nothing_to_plot(tmp_path, capsys):
    doc = json.loads(RUN_A.read_text())
    doc["records"], doc["finished"], doc["cut_short"] = [], False, "interrupted (SIGINT)"
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps(doc))
    assert main_for_tests(["plot", str(empty), "-o", str(tmp_path / "p.png")]) == 2
    assert "nothing to plot" in capsys.readouterr().err
    # next to a run that has sizes, an empty run is just an empty table
    assert main_for_tests(["report", str(RUN_A), str(empty), "-o", str(tmp_path / "r.html")]) == 0
    assert "no (interrupted (SIGINT))" in (tmp_path / "r.html").read_text()


def test_missing_matplotlib_is_one_line_naming_the_fix(tmp_path, monkeypatch, capsys):
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    out = tmp_path / "p.png"
    # a missing package is the environment's fault (BackendUnavailable): exit 3, not bad input
    assert main_for_tests(["plot", str(RUN_A), "-o", str(out)]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install matplotlib" in err
    assert main_for_tests(["report", str(RUN_A), "-o", str(tmp_path / "r.html")]) == 3
    assert "pip install matplotlib" in capsys.readouterr().err
    assert not out.exists()


def test_importing_pybench_does_not_import_matplotlib_or_jinja2():
    code = ("import sys, pybench, pybench.cli.reports, pybench.report.compare, pybench.report.plot, "
            "pybench.report.html, pybench.report.figures; print('matplotlib' in sys.modules, 'jinja2' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         cwd=Path(__file__).parent)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False False"  # jinja2 too is imported only to render a report


# -- report ---------------------------------------------------------------------------------

def _report(tmp_path: Path, *inputs: str, name: str = "report.html") -> Path:
    out = tmp_path / name
    assert main_for_tests(["report", *inputs, "--model", str(MODEL), "--ccr", str(CCR), "-o", str(out)]) == 0
    return out


def test_report_is_one_self_contained_file(tmp_path):
    out = _report(tmp_path, str(RUN_A), str(RUN_FP16))
    text = out.read_text()
    tags = _tags(text)
    imgs = [a for t, a in tags if t == "img"]
    assert len(imgs) == 4  # bandwidth, latency, CCR, scaling efficiency
    for a in imgs:
        assert a["src"].startswith("data:image/png;base64,")
        assert base64.b64decode(a["src"].split(",", 1)[1]).startswith(PNG_MAGIC)
    # nothing to fetch, nothing to run
    assert not [t for t, _ in tags if t in ("script", "link", "iframe", "object", "embed")]
    assert not re.search(r"(src|href)\s*=\s*[\"']?(https?:|//)", text)
    assert "Content-Security-Policy" in text and "default-src 'none'" in text
    for expected in ("Environment", "Open MPI v5.0.11", "compare_allreduce_fp16.json", "busbw (GB/s)",
                     "alpha-beta model: allreduce / mpi", "CCR against batch size", "scaling efficiency",
                     "zero3", "Peak bus bandwidth"):
        assert expected in text


def test_report_escapes_everything_read_from_files(tmp_path):
    hostile = _hostile_copy(tmp_path)
    ccr = json.loads(CCR.read_text())
    for row in ccr["rows"]:
        row["strategy"] = HOSTILE
    ccr["notes"] = [HOSTILE]
    ccr["config"]["flops_source"] = HOSTILE
    hostile_ccr = tmp_path / "ccr.json"
    hostile_ccr.write_text(json.dumps(ccr))
    out = tmp_path / "r.html"
    assert main_for_tests(["report", str(hostile), "--model", str(MODEL), "--ccr", str(hostile_ccr),
                           "--title", HOSTILE, "-o", str(out)]) == 0
    text = out.read_text()
    assert "<script" not in text.lower()
    tags = _tags(text)
    assert [t for t, _ in tags if t in ("img", "script")] == ["img"] * 4  # only our four plots
    assert not [(t, k) for t, a in tags for k in a if k.startswith("on")]  # no event handler attribute
    # Escaped (in the template engine's entity spelling: &#34; for a double quote) ...
    assert "&lt;script&gt;document.title=&#34;PWNED&#34;&lt;/script&gt;" in text
    assert "run&lt;img src=x onerror=alert(1)&gt;$.json" in text
    # ... so a parser reads the payload back, whole, as text: title, every file field, CCR rows and notes.
    nodes = _text_nodes(text)
    # title and h1, seven environment fields, every CCR row, the note and the flops source
    assert sum(HOSTILE in n for n in nodes) == 2 + 7 + len(ccr["rows"]) + 2, [n for n in nodes if "PWNED" in n]
    assert "run<img src=x onerror=alert(1)>$.json" in "\n".join(nodes)


# -- the report in a real browser -----------------------------------------------------------

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (Debian: apt-get install -y "
                                                             "chromium); the browser check of the report is skipped")

_PROBE = """<script nonce="pybenchtest">
window.addEventListener("load", () => {
  const imgs = [...document.images];
  const d = document.createElement("div");
  d.id = "pybench-probe";
  d.dataset.images = imgs.length;
  d.dataset.loaded = imgs.filter(i => i.complete && i.naturalWidth > 0).length;
  d.dataset.widths = imgs.map(i => i.naturalWidth).join(",");
  d.dataset.title = document.title;
  d.dataset.tables = document.querySelectorAll("table").length;
  d.dataset.alts = imgs.map(i => i.alt).join("|");
  const summary = document.getElementById("summary");
  d.dataset.summary = summary ? summary.textContent : "";
  d.dataset.first = document.querySelector("h1").nextElementSibling.id;
  document.body.appendChild(d);
});
</script>"""


def _browser(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    assert CHROMIUM is not None
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={tmp_path / 'chromium-profile'}", "--enable-logging=stderr", "--v=0", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=90, stdin=subprocess.DEVNULL)


def _console_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]


@needs_chromium
def test_report_renders_in_headless_chromium_with_images_and_no_console_errors(tmp_path):
    hostile = _hostile_copy(tmp_path)
    matrix = tmp_path / "matrix.json"
    matrix.write_text(json.dumps(link_matrix()))
    report = tmp_path / "report.html"
    assert main_for_tests(["report", str(RUN_A), str(hostile), "--baseline", str(RUN_B), "--model", str(MODEL),
                           "--ccr", str(CCR), "--matrix", str(matrix), "-o", str(report)]) == 0
    # The report allows no script at all; the probe is let in by a nonce in a test copy only.
    text = report.read_text()
    assert "default-src 'none';" in text
    probe = tmp_path / "probe.html"
    probe.write_text(text.replace("default-src 'none';", "default-src 'none'; script-src 'nonce-pybenchtest';", 1)
                     .replace("</body>", _PROBE + "</body>"))
    done = _browser(["--virtual-time-budget=5000", "--dump-dom", probe.as_uri()], tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    m = re.search(r'<div id="pybench-probe"([^>]*)>', done.stdout)
    assert m, f"the probe did not run; DOM tail: {done.stdout[-500:]!r}"
    attrs = dict(re.findall(r'data-(\w+)="([^"]*)"', m.group(1)))
    # bandwidth, latency, comparison, CCR per strategy, scaling efficiency, link heatmap
    assert attrs["images"] == "6" and attrs["loaded"] == "6", attrs
    alts = attrs["alts"].split("|")
    assert "link-matrix heatmap" in alts and "comparison: time ratio per size with its interval" in alts
    assert attrs["first"] == "summary"  # the report opens with its summary
    for fact in ("Peak bus bandwidth", "alpha", "Worst size", "Verdict:"):
        assert fact in attrs["summary"], attrs["summary"]
    assert all(int(w) > 300 for w in attrs["widths"].split(","))
    assert attrs["title"] == "pybench report"  # the hostile payload never ran
    assert int(attrs["tables"]) >= 4
    dom = done.stdout
    assert dom.count("<script") == 1  # the probe; the payload is text, not an element
    assert not re.search(r"<[a-z]+\s[^>]*\bon[a-z]+=", dom)  # no element carries an event handler
    assert _console_lines(done.stderr) == []

    # The untouched report: renders (screenshot) with no console message (no CSP violation either).
    shot = tmp_path / "shot.png"
    done = _browser(["--window-size=1300,2000", f"--screenshot={shot}", report.as_uri()], tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert shot.read_bytes().startswith(PNG_MAGIC) and shot.stat().st_size > 20_000
    assert _console_lines(done.stderr) == []
