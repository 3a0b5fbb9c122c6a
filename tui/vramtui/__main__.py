from vramtui.cli import main

raise SystemExit(main())
