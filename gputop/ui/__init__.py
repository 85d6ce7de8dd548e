"""The Textual dashboard. Only this package imports Textual, so the other modes start fast without it."""
