"""The HTML report: one self-contained page (inline CSS, no script, nothing loaded from the
network) telling every format's explanation, beside the user's source lines it quotes.

`page` lays out the page and its sections, `story` tells each dead variable's story, `source`
shows the quoted source lines annotated, `markup` escapes and links.
"""
