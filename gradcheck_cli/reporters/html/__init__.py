"""The HTML report's parts: the model map drawn as inline SVG (`map_svg`)."""
