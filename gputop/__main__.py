from gputop.cli import entry

entry()
