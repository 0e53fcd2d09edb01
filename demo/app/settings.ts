/**
 * Model settings, kept in this browser's localStorage (the API key never
 * leaves it except in requests to the endpoint the user named), and the
 * model they select.
 */
import { builtinModel } from './builtin-model.js';
import type { ChatModel } from './model.js';
import { openAiModel, type OpenAiSettings } from './openai-model.js';
import { scriptedModel } from './scripted-model.js';

const SETTINGS_KEY = 'tabula-demo:model';

/** Which model answers, and the endpoint's details. */
export interface ModelSettings extends OpenAiSettings {
  readonly kind: 'scripted' | 'openai' | 'builtin';
}

export const DEFAULT_SETTINGS: ModelSettings = { kind: 'scripted', baseUrl: 'https://api.openai.com/v1', apiKey: '', model: 'gpt-4o-mini', contextTokens: 128_000 };

/** The saved settings, or the defaults. */
export function loadSettings(): ModelSettings {
  try {
    const saved = JSON.parse(localStorage.getItem(SETTINGS_KEY) ?? '{}') as Partial<ModelSettings>;
    const kind = saved.kind === 'openai' || saved.kind === 'builtin' ? saved.kind : 'scripted';
    return {
      kind,
      baseUrl: typeof saved.baseUrl === 'string' ? saved.baseUrl : DEFAULT_SETTINGS.baseUrl,
      apiKey: typeof saved.apiKey === 'string' ? saved.apiKey : '',
      model: typeof saved.model === 'string' && saved.model !== '' ? saved.model : DEFAULT_SETTINGS.model,
      contextTokens: typeof saved.contextTokens === 'number' && saved.contextTokens >= 1024 ? saved.contextTokens : DEFAULT_SETTINGS.contextTokens,
    };
  } catch {
    return DEFAULT_SETTINGS;
  }
}

export function saveSettings(settings: ModelSettings): void {
  localStorage.setItem(SETTINGS_KEY, JSON.stringify(settings));
}

/** The model the settings pick. */
export function modelFor(settings: ModelSettings): ChatModel {
  switch (settings.kind) {
    case 'openai':
      return openAiModel(settings);
    case 'builtin':
      return builtinModel();
    case 'scripted':
      return scriptedModel();
  }
}
