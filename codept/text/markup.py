"""Markup of doc comments (Javadoc, JSDoc, PHPDoc, YARD/RDoc), shared by the ``code_doc`` objective
(token space) and the code-search probe's query cleaner (codept.probe.query, string space), so the
doc side a model trains on and the queries it is probed with are cut the same way.

Regexes only; no state. Not covered: Markdown/reST markup (the probe cleaner handles it on strings).
"""

from __future__ import annotations

import re

# a line that opens with a block tag (@param, @return, @api): the description ends there
BLOCK_TAG_LINE = re.compile(r"^\s*@[A-Za-z!]")
# a JSDoc tag whose text is the description (when none comes before the tags)
DESCRIPTION_TAG = re.compile(r"@(?:description|desc|summary)\b\s*", re.I)
# HTML that ends a paragraph (a Javadoc first sentence ends there too) / that only formats text
HTML_BLOCK = re.compile(
    r"</?(?:p|br|pre|ul|ol|li|h[1-6]|table|tr|td|th|thead|tbody|dl|dt|dd|hr|div|blockquote|center)\b[^>]*/?>",
    re.I)
HTML_INLINE = re.compile(
    r"</?(?:a|b|i|u|s|em|strong|code|tt|var|sup|sub|span|font|small|big|cite|dfn|kbd|samp|strike|abbr|"
    r"img|q|mark|del|ins|nobr|wbr)\b[^>]*/?>", re.I)
# the opening of an inline tag: {@code x}, {@link Y label}
INLINE_TAG_OPEN = re.compile(r"\{@[A-Za-z]+\s*")
# the languages whose docs carry this markup
LANGS = ("java", "javascript", "php", "ruby")
