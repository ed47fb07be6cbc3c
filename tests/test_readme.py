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
    assert test_command in (ROOT / ".ci" / "run").read_text()
