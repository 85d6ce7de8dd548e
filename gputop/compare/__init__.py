"""Two runs of a training job compared (docs/recording.md, "Comparing two runs"): ``summary`` (a run in a few
numbers, from its snapshots), ``decode`` (a summary from a ``--report-json`` document or from JSON kept earlier,
every value checked), ``changes`` (what changed between two), ``render`` (text and JSON)."""
