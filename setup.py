"""The wheel's packages (every other setting is in pyproject.toml): ``codept`` and its subpackages,
plus the top-level data folders mapped into it (codept.resources reads them from either place):
grammars/ -> codept/grammars, ds_configs/ -> codept/ds_configs, recipes/ -> codept/recipes."""

from setuptools import find_namespace_packages, setup

SHIPPED = {f"codept.{name}": name for name in ("grammars", "ds_configs", "recipes")}  # codept.resources.SHIPPED

# namespace packages: codept/data, codept/structure, ... have no __init__.py
setup(packages=find_namespace_packages(include=["codept", "codept.*"], exclude=["*.__pycache__"]) + list(SHIPPED), package_dir=SHIPPED,
      package_data={pkg: ["**/*"] for pkg in SHIPPED}, exclude_package_data={pkg: ["**/__pycache__/*"] for pkg in SHIPPED})
