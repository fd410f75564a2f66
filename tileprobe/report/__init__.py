"""Renderings of variant records: terminal tables (rich), Markdown for bug reports, self-contained HTML."""
