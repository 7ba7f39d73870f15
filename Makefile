# Convenience wrapper: every target runs the single entry point, tasks.py.
PYTHON ?= python3

.PHONY: book test execute setup clean
book:
	$(PYTHON) tasks.py book
test:
	$(PYTHON) tasks.py test
execute:
	$(PYTHON) tasks.py execute
setup:
	$(PYTHON) tasks.py setup
clean:
	$(PYTHON) tasks.py clean
