"""The kernel layer: types, front end, IR, code generation, builds, devices and launches."""
