"""A sitecustomize that a job's environment already has: gputop's must run it too."""

import os

os.environ["EXISTING_SITECUSTOMIZE_RAN"] = "1"
