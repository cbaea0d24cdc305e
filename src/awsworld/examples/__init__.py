"""Examples bundled with the package (``awsworld demo`` runs ``order``)."""
