@"%~dp0\..\@anthropic-ai\claude-code\bin\claude.exe"   %*
