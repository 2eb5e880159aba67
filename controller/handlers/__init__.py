"""Event handlers by family. Each computes lazy DataFrames; ``ControllerContext.commit`` commits."""
