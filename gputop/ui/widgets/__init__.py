"""The dashboard's widgets: each owns its CSS and draws one part of a snapshot."""
