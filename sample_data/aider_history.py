"""The Aider sample: a chat history markdown file as aider writes it (written as is; aider logs no
tool calls, so there is no Script to render)."""

from __future__ import annotations

AIDER_HISTORY = """
# aider chat started at 2026-03-11 09:12:40

> /home/kim/.local/bin/aider --model sonnet src/slugkit/slugify.py tests/test_slugify.py
> Aider v0.86.1
> Main model: anthropic/claude-sonnet-4-20250514 with diff edit format, infinite output
> Weak model: anthropic/claude-3-5-haiku-20241022
> Git repo: .git with 38 files
> Repo-map: using 4096 tokens, auto refresh
> Added src/slugkit/slugify.py to the chat.
> Added tests/test_slugify.py to the chat.

#### slugify("Crème brûlée") returns "crme-brle". Keep accented letters as their ASCII base letter instead of dropping them.

The accents are dropped because the filter keeps only `[a-z0-9]` after lowercasing. Decomposing
the text first (NFKD) splits "è" into "e" plus a combining mark, and the marks can then be
removed before filtering.

src/slugkit/slugify.py
```python
<<<<<<< SEARCH
import re
=======
import re
import unicodedata
>>>>>>> REPLACE
```

src/slugkit/slugify.py
```python
<<<<<<< SEARCH
def slugify(text: str) -> str:
    text = text.lower()
=======
def slugify(text: str) -> str:
    text = unicodedata.normalize("NFKD", text)
    text = "".join(ch for ch in text if not unicodedata.combining(ch))
    text = text.lower()
>>>>>>> REPLACE
```

tests/test_slugify.py
```python
<<<<<<< SEARCH
def test_spaces_become_dashes():
=======
def test_accents_keep_base_letters():
    assert slugify("Crème brûlée") == "creme-brulee"


def test_spaces_become_dashes():
>>>>>>> REPLACE
```

> Tokens: 4.3k sent, 301 received. Cost: $0.02 message, $0.02 session.
> Applied edit to src/slugkit/slugify.py
> Applied edit to src/slugkit/slugify.py
> Applied edit to tests/test_slugify.py
> Commit 3a9c1f2 fix: Transliterate accented letters in slugify

#### /run pytest tests/test_slugify.py -q

> .....                                                                    [100%]
> 5 passed in 0.04s
> Add 0.1k tokens of command output to the chat? (Y)es/(N)o [Yes]: n

#### Good. Add a line about it to CHANGELOG.md under Unreleased.

> CHANGELOG.md
> Add file to the chat? (Y)es/(N)o/(D)on't ask again [Yes]: y

CHANGELOG.md
```markdown
<<<<<<< SEARCH
## Unreleased
=======
## Unreleased

- `slugify` keeps accented letters as their ASCII base letter ("Crème" → "creme").
>>>>>>> REPLACE
```

You can check the whole suite with:

```bash
pytest -q
```

> Tokens: 5.0k sent, 96 received. Cost: $0.02 message, $0.04 session.
> Applied edit to CHANGELOG.md
> Commit 8d02e7b docs: Note slugify transliteration in the changelog
> pytest -q
> Run shell command? (Y)es/(N)o/(D)on't ask again [Yes]: n
""".lstrip()
