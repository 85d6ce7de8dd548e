"""The dashboard's screens: the overview, a process's detail, the signal dialog and the key help."""
