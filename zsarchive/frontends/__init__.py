"""The archive's front ends for people: the xarray backend and the local web page (``zs serve``)."""
