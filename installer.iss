; PCM Canvas for Windows: an Inno Setup 6 script over the PyInstaller one-folder bundle.
;
;   bash packaging/build.sh       builds dist\pcm-canvas\ (the release workflow runs it on Windows)
;   iscc installer.iss            writes dist\installer\PCM-Canvas-Setup-<version>.exe
;
; Per user, without administrator rights (installs under %LOCALAPPDATA%\Programs), a Start-menu
; entry, an optional desktop shortcut, "Open with" for exported sessions, and an uninstaller that
; keeps the user's data unless asked to delete it. Every name comes from packaging\bundle.ini, the
; file packaging\pcm_canvas.spec reads too; tests\packaging\test_installer.py checks that each
; file referenced here is one the spec produces.

#define Ini AddBackslash(SourcePath) + "packaging\bundle.ini"
#define AppName ReadIni(Ini, "bundle", "app_name", "")
#define AppVersion ReadIni(Ini, "bundle", "version", "")
#define Publisher ReadIni(Ini, "bundle", "publisher", "")
#define BundleFolder ReadIni(Ini, "bundle", "folder", "")
#define GuiExe ReadIni(Ini, "bundle", "gui", "") + ".exe"
#define CliExe ReadIni(Ini, "bundle", "cli", "") + ".exe"
#define ExportExt ReadIni(Ini, "bundle", "export_ext", "")
#define IconFile ReadIni(Ini, "bundle", "ico", "")
#define DataFolder ReadIni(Ini, "bundle", "data_folder", "")
#define ProgId ReadIni(Ini, "bundle", "progid", "")
#define AppId ReadIni(Ini, "bundle", "app_id", "")

#if AppName == "" || BundleFolder == "" || AppId == ""
  #error packaging\bundle.ini was not found or lacks a name
#endif

[Setup]
AppId={{{#AppId}}
AppName={#AppName}
AppVersion={#AppVersion}
AppPublisher={#Publisher}
DefaultDirName={autopf}\{#AppName}
DefaultGroupName={#AppName}
DisableProgramGroupPage=yes
PrivilegesRequired=lowest
ArchitecturesAllowed=x64compatible
ArchitecturesInstallIn64BitMode=x64compatible
OutputDir=dist\installer
OutputBaseFilename=PCM-Canvas-Setup-{#AppVersion}
SetupIconFile={#IconFile}
UninstallDisplayIcon={app}\{#GuiExe}
UninstallDisplayName={#AppName}
Compression=lzma2
SolidCompression=yes
ChangesAssociations=yes
WizardStyle=modern

[Tasks]
Name: "desktopicon"; Description: "{cm:CreateDesktopIcon}"; GroupDescription: "{cm:AdditionalIcons}"; Flags: unchecked
Name: "openwith"; Description: "Offer {#AppName} to open exported sessions ({#ExportExt} files, under ""Open with"")"; GroupDescription: "File types:"

[Files]
Source: "dist\{#BundleFolder}\*"; DestDir: "{app}"; Flags: ignoreversion recursesubdirs createallsubdirs

[Icons]
Name: "{group}\{#AppName}"; Filename: "{app}\{#GuiExe}"
Name: "{group}\Uninstall {#AppName}"; Filename: "{uninstallexe}"
Name: "{autodesktop}\{#AppName}"; Filename: "{app}\{#GuiExe}"; Tasks: desktopicon

[Registry]
; Exported sessions are JSON documents (File > Export, `pcm export -o`). The app is added to the
; "Open with" list of .json files instead of taking over every .json file; `pcm-canvas FILE`
; imports the session and opens it. HKA is the current user's classes in a per-user install.
Root: HKA; Subkey: "Software\Classes\{#ProgId}"; ValueType: string; ValueName: ""; ValueData: "{#AppName} session"; Flags: uninsdeletekey; Tasks: openwith
Root: HKA; Subkey: "Software\Classes\{#ProgId}\DefaultIcon"; ValueType: string; ValueName: ""; ValueData: """{app}\{#GuiExe}"",0"; Tasks: openwith
Root: HKA; Subkey: "Software\Classes\{#ProgId}\shell\open\command"; ValueType: string; ValueName: ""; ValueData: """{app}\{#GuiExe}"" ""%1"""; Tasks: openwith
Root: HKA; Subkey: "Software\Classes\{#ExportExt}\OpenWithProgids"; ValueType: string; ValueName: "{#ProgId}"; ValueData: ""; Flags: uninsdeletevalue; Tasks: openwith
Root: HKA; Subkey: "Software\Classes\Applications\{#GuiExe}\SupportedTypes"; ValueType: string; ValueName: "{#ExportExt}"; ValueData: ""; Flags: uninsdeletekey; Tasks: openwith

[Run]
Filename: "{app}\{#GuiExe}"; Description: "{cm:LaunchProgram,{#AppName}}"; Flags: nowait postinstall skipifsilent

[Code]
{ The user's data (sessions, settings, providers: platformdirs' user data folder of the app,
  %LOCALAPPDATA%\pcm-canvas) outlives the program: the uninstaller asks, with "No" (keep) as the
  default, and a silent uninstall keeps it. A data folder chosen in Settings elsewhere is never
  deleted; the question names it. }

function DataDir(): String;
begin
  Result := ExpandConstant('{localappdata}\{#DataFolder}');
end;

function ChosenDataDir(): String;
var
  Text: AnsiString;
begin
  Result := '';
  if LoadStringFromFile(DataDir() + '\data_location.txt', Text) then
    Result := Trim(String(Text));
end;

procedure CurUninstallStepChanged(CurUninstallStep: TUninstallStep);
var
  Question, Chosen: String;
begin
  if (CurUninstallStep <> usPostUninstall) or UninstallSilent() or not DirExists(DataDir()) then
    Exit;
  Question := 'Also delete your {#AppName} data (sessions, settings, providers) in' + #13#10 +
    DataDir() + ' ?' + #13#10#13#10 + 'Choose No to keep it for a later installation.';
  Chosen := ChosenDataDir();
  if Chosen <> '' then
    Question := Question + #13#10#13#10 + 'The data folder chosen in Settings, ' + Chosen +
      ', is kept either way.';
  if MsgBox(Question, mbConfirmation, MB_YESNO or MB_DEFBUTTON2) = IDYES then
    DelTree(DataDir(), True, True, True);
end;
