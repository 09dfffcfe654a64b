"""Build hook: ship the top-level data folders (isa/, mappings/, workloads/) inside the wheel.

They live at the repository root (the layout is fixed by the product) but must resolve from an installed
package too, so the build copies them to archsim/_shipped/<folder>/. archsim.paths looks there first.
"""
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

SHIPPED = ("isa", "mappings", "workloads")


class BuildWithShippedData(build_py):
    def run(self):
        super().run()
        root = Path(__file__).resolve().parent
        for name in SHIPPED:
            src = root / name
            if src.is_dir():
                dst = Path(self.build_lib) / "archsim" / "_shipped" / name
                shutil.rmtree(dst, ignore_errors=True)
                shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


setup(cmdclass={"build_py": BuildWithShippedData})
