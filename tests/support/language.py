"""What tells a page's language apart in the tests."""
import re

# CJK punctuation, kana, ideographs and full-width forms: none belongs on an English page
CJK = re.compile(r"[\u3000-\u9fff\uff00-\uffef]")
