from secure_serde.cli import main

raise SystemExit(main())
