"""Pure text builders for the dashboard: the lines of GPU cards, panels and host sections. No Textual here."""
