@"%~dp0\node_modules\@anthropic-ai\claude-code\bin\claude.exe"   %*
