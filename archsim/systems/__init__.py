"""The systems: one package per system (archsim/systems/<name>/: its config and run function, its model, its
compiler or mapping policy). Each package registers its system(s) with archsim.registry when imported; the
registry finds them by walking this package, so adding a system is adding a package here (docs/extending.md).
"""
