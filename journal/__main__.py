from journal.cli import main

raise SystemExit(main())
