"""The README's quickstart runs as written, and CI calls its test command."""

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_quickstart_runs():
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks, "README has no python block"
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {})


def test_ci_runs_the_readme_test_command():
    text = (ROOT / "README.md").read_text()
    commands = re.findall(r"```bash\n(.*?)\n```", text, flags=re.S)
    assert len(commands) == 2, "README must give exactly two set-up commands"
    test_command = next(c for c in commands if "pytest" in c)
    ci = (ROOT / ".ci" / "run").read_text()
    assert test_command in ci
    # on torch's AVX2 kernels, and the torch-heavy tests without vector
    # extensions, as CONTRIBUTING.md says to run them locally
    assert "export ATEN_CPU_CAPABILITY=avx2" in ci.split(test_command)[0]
    assert "ATEN_CPU_CAPABILITY=default" in ci
    contributing = (ROOT / "CONTRIBUTING.md").read_text()
    for capability in ("avx2", "default"):
        assert f"ATEN_CPU_CAPABILITY={capability} .venv/bin/python" in contributing


def test_readme_and_user_guide_list_every_skcal_scorer():
    from sklearn.metrics import get_scorer_names as sklearn_names

    from skcal.metrics import get_scorer_names

    ours = set(get_scorer_names()) - set(sklearn_names())
    assert ours  # the registry has skcal's own scorers

    def listed(text):
        return set(re.findall(r'"(neg_[a-z0-9_]+)"', text))  # "neg_l2_..."

    readme = (ROOT / "README.md").read_text()
    guide = (ROOT / "doc" / "user_guide.rst").read_text()
    scorers_section = guide.split("\nScorers\n-------\n")[1].split("\n-----")[0]
    assert listed(readme.split("**Scorers**")[1].split("\n- ")[0]) == ours
    assert listed(scorers_section) >= ours


def test_docs_landing_page_quickstart_runs(capsys):
    text = (ROOT / "doc" / "index.rst").read_text()
    blocks = re.findall(r"\.\. code-block:: python\n\n((?:   .*\n|\n)+)", text)
    assert len(blocks) == 1, "the landing page has one quickstart"
    code = "\n".join(line[3:] for line in blocks[0].splitlines())
    assert len(code.strip().splitlines()) <= 11  # a short quickstart
    exec(compile(code, "doc/index.rst", "exec"), {})
    out = capsys.readouterr().out
    assert "NLL" in out and "ECE" in out  # the report was printed
