@SETLOCAL

@IF EXIST "%~dp0\-S.exe" (
  @SET "_prog=%~dp0\-S.exe"
) ELSE (
  @SET "_prog=-S"
  @SET PATHEXT=%PATHEXT:;.JS;=;%
)

"%_prog%" NODE_OPTIONS=--no-warnings node "%~dp0\..\envtool\bin\envtool.js" %*
@ENDLOCAL
