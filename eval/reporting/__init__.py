"""Reports of a comparison: report.json, report.md and report.html, their charts and the legibility check."""
