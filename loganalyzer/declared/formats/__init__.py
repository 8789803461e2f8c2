"""The declared formats loganalyzer ships: TOML files registered as data-only plugins in
its own pyproject.toml, as a third-party package would register its own."""
