"""The directory ``gputop run`` puts first on the job's ``PYTHONPATH``: only ``sitecustomize.py`` matters here.

It is a package so that wheels carry it; nothing imports it as ``gputop.probe._boot``.
"""
