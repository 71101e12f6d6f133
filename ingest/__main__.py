"""`python -m loopledger`: the same as the `loopledger` command."""

from loopledger.entry import main

main()
