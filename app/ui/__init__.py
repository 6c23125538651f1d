"""The desktop app: the only package that imports PySide6/qasync (DESIGN.md §2).

``app.ui.window.MainWindow`` holds the canvas, the composer, the dockable panels and the action
objects that do what the user asks (``canvas_actions``, ``detail_actions``, ``file_actions``,
``attach_actions``);
``app.ui.controller.EngineController`` bridges the engine (asyncio on the Qt loop via qasync)
to Qt signals. Adapters reach the ui only through the callables of ``app.ui.services.Services``,
which ``app/desktop.py`` (the desktop composition root) fills in.
"""
