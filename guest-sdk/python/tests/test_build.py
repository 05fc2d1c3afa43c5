"""The build driver's app module and command line (componentize-py itself is not run)."""

import unittest
from pathlib import Path

from spindle_guest.build import ENTRY_MODULE, SDK_ROOT, command, entry_source


class BuildTest(unittest.TestCase):
    def test_the_app_module_names_the_kind_and_nothing_else(self) -> None:
        source = entry_source("greet:kind")
        self.assertIn("Kind = export('greet:kind')", source)
        compile(source, f"{ENTRY_MODULE}.py", "exec")

    def test_the_command_puts_the_entry_the_sdk_and_the_kind_on_the_path(self) -> None:
        argv = command(
            "greet", Path("out.wasm"), wit=Path("/w"), paths=[Path("/k")], entry_dir=Path("/e"), tool="python -m componentize_py"
        )
        self.assertEqual(argv[:7], ["python", "-m", "componentize_py", "-d", "/w", "-w", "job-kind"])
        self.assertEqual(argv[7:], ["componentize", "-p", "/e", "-p", str(SDK_ROOT), "-p", "/k", ENTRY_MODULE, "-o", "out.wasm"])


if __name__ == "__main__":
    unittest.main()
