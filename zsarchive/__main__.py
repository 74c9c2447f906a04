from zsarchive.cli import run

run()
