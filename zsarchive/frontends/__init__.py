"""Views of an archive for people: the xarray backend and the local web page (``zs serve``)."""
