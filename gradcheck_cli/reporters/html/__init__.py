"""The HTML report: one self-contained page (inline CSS and SVG, no script, nothing loaded from
the network) telling every format's explanation, beside the model's map and the user's source
lines it quotes.

`page` lays out the page and its sections, `map_svg` draws the model map (laid out by grandalf),
`story` tells each dead variable's story, `source` shows the quoted source lines annotated,
`markup` escapes and links.
"""
